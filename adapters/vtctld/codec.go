package vtctld

import "fmt"

// codec is the gRPC codec of the client's messages: the protobuf wire format of wire.go,
// named "proto" so that vtctld reads it as it reads any protobuf client.
type codec struct{}

func (codec) Name() string { return "proto" }

func (codec) Marshal(v any) ([]byte, error) {
	m, ok := v.(message)
	if !ok {
		return nil, fmt.Errorf("vtctld: codec: %T is not a request of this client", v)
	}
	return m.marshal(), nil
}

func (codec) Unmarshal(data []byte, v any) error {
	r, ok := v.(reply)
	if !ok {
		return fmt.Errorf("vtctld: codec: %T is not a response of this client", v)
	}
	return r.unmarshal(data)
}
