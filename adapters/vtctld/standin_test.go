package vtctld_test

import (
	"context"
	"net"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	topodatapb "vitess.io/vitess/go/vt/proto/topodata"
	vtctldatapb "vitess.io/vitess/go/vt/proto/vtctldata"
	vtctlservicepb "vitess.io/vitess/go/vt/proto/vtctlservice"

	"loam.dev/router/adapters"
)

// standIn is an in-process stand-in for vtctld: a gRPC server of Vitess's own generated
// Vtctld service and messages, answering the four methods the client calls from an
// in-memory topology. It is not vtctld. What it does is what the client relies on and
// what reference/vitess.md and the protos' comments say vtctld does: GetTablets by alias
// ignores keyspace and shard; TabletExternallyReparented changes the tablet's type to
// PRIMARY and answers with its keyspace, shard, new and old primary, and fails for a
// tablet that is not in the topology ("node doesn't exist: ..."; the NotFound code is the
// stand-in's choice); GetSrvKeyspaces answers per cell; ApplyVSchema needs the keyspace to
// exist. Every other method is Unimplemented.
type standIn struct {
	vtctlservicepb.UnimplementedVtctldServer

	mu        sync.Mutex
	tablets   map[string]*topodatapb.Tablet                 // by alias text
	srv       map[string]map[string]*topodatapb.SrvKeyspace // cell -> keyspace
	keyspaces map[string]bool
	applied   map[string]*vtctldatapb.ApplyVSchemaRequest // last request per keyspace
	calls     []string
	hold      chan struct{} // when set, every call waits for it to close or for its ctx
}

func newStandIn() *standIn {
	return &standIn{tablets: map[string]*topodatapb.Tablet{}, srv: map[string]map[string]*topodatapb.SrvKeyspace{},
		keyspaces: map[string]bool{}, applied: map[string]*vtctldatapb.ApplyVSchemaRequest{}}
}

// serve starts a gRPC server for impl on a free loopback port; stop stops it.
func serve(impl vtctlservicepb.VtctldServer, opts ...grpc.ServerOption) (addr string, stop func(), err error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	s := grpc.NewServer(opts...)
	vtctlservicepb.RegisterVtctldServer(s, impl)
	go s.Serve(lis)
	return lis.Addr().String(), s.Stop, nil
}

func (s *standIn) addTablet(alias string, keyspace, shard string, typ topodatapb.TabletType) {
	a, err := adapters.ParseTabletAlias(alias)
	if err != nil {
		panic(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keyspaces[keyspace] = true
	s.tablets[a.String()] = &topodatapb.Tablet{Alias: &topodatapb.TabletAlias{Cell: a.Cell, Uid: a.UID}, Keyspace: keyspace, Shard: shard, Type: typ}
}

func (s *standIn) tabletType(alias string) topodatapb.TabletType {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tablets[alias].GetType()
}

func (s *standIn) called() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...)
}

// enter records the call and waits while hold is set.
func (s *standIn) enter(ctx context.Context, rpc string) error {
	s.mu.Lock()
	s.calls = append(s.calls, rpc)
	hold := s.hold
	s.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
	return nil
}

func (s *standIn) GetTablets(ctx context.Context, req *vtctldatapb.GetTabletsRequest) (*vtctldatapb.GetTabletsResponse, error) {
	if err := s.enter(ctx, "GetTablets"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	resp := &vtctldatapb.GetTabletsResponse{}
	for _, a := range req.GetTabletAliases() {
		if t, ok := s.tablets[adapters.TabletAlias{Cell: a.GetCell(), UID: a.GetUid()}.String()]; ok {
			resp.Tablets = append(resp.Tablets, proto.Clone(t).(*topodatapb.Tablet))
		}
	}
	return resp, nil
}

func (s *standIn) TabletExternallyReparented(ctx context.Context, req *vtctldatapb.TabletExternallyReparentedRequest) (*vtctldatapb.TabletExternallyReparentedResponse, error) {
	if err := s.enter(ctx, "TabletExternallyReparented"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	alias := adapters.TabletAlias{Cell: req.GetTablet().GetCell(), UID: req.GetTablet().GetUid()}.String()
	t, ok := s.tablets[alias]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "node doesn't exist: /vitess/%s/tablets/%s/Tablet", req.GetTablet().GetCell(), alias)
	}
	resp := &vtctldatapb.TabletExternallyReparentedResponse{Keyspace: t.Keyspace, Shard: t.Shard, NewPrimary: t.Alias}
	for _, o := range s.tablets {
		if o != t && o.Keyspace == t.Keyspace && o.Shard == t.Shard && o.Type == topodatapb.TabletType_PRIMARY {
			o.Type = topodatapb.TabletType_REPLICA
			resp.OldPrimary = o.Alias
		}
	}
	t.Type = topodatapb.TabletType_PRIMARY
	return resp, nil
}

func (s *standIn) GetSrvKeyspaces(ctx context.Context, req *vtctldatapb.GetSrvKeyspacesRequest) (*vtctldatapb.GetSrvKeyspacesResponse, error) {
	if err := s.enter(ctx, "GetSrvKeyspaces"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	resp := &vtctldatapb.GetSrvKeyspacesResponse{SrvKeyspaces: map[string]*topodatapb.SrvKeyspace{}}
	for _, cell := range req.GetCells() {
		if ks, ok := s.srv[cell][req.GetKeyspace()]; ok {
			resp.SrvKeyspaces[cell] = ks
		}
	}
	return resp, nil
}

func (s *standIn) ApplyVSchema(ctx context.Context, req *vtctldatapb.ApplyVSchemaRequest) (*vtctldatapb.ApplyVSchemaResponse, error) {
	if err := s.enter(ctx, "ApplyVSchema"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.keyspaces[req.GetKeyspace()] {
		return nil, status.Errorf(codes.NotFound, "node doesn't exist: keyspaces/%s/Keyspace", req.GetKeyspace())
	}
	s.applied[req.GetKeyspace()] = proto.Clone(req).(*vtctldatapb.ApplyVSchemaRequest)
	return &vtctldatapb.ApplyVSchemaResponse{VSchema: req.GetVSchema()}, nil
}
