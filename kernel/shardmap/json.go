package shardmap

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"loam.dev/router/kernel/keyrange"
)

// ErrJSON is matched (errors.Is) by every error of UnmarshalJSON.
var ErrJSON = errors.New("shardmap: bad JSON")

// The JSON form, for people. Enums are names; ranges are Vitess shard names; a range or
// list value is a JSON integer or string. Example:
//
//	{"version":3,"generation":2,"engine":"postgres","router":{"kind":"pgdog","name":"app"},
//	 "scheme":{"kind":"pg_hash","column":"customer_id","type":"bigint","tables":["orders"],"shards":2},
//	 "shards":[{"name":"s0","backend":{"host":"10.0.0.11","port":5432,"database":"app"},"fence":"open"},
//	           {"name":"s1","backend":{"host":"10.0.0.12","port":5432,"database":"app"},"fence":"open"}],
//	 "state":{"phase":"serving"}}

type recordJSON struct {
	Version    uint64      `json:"version"`
	Generation uint64      `json:"generation"`
	Engine     string      `json:"engine"`
	Router     routerJSON  `json:"router"`
	Scheme     *schemeJSON `json:"scheme"`
	Shards     []shardJSON `json:"shards"`
	State      stateJSON   `json:"state"`
	Target     *layoutJSON `json:"target,omitempty"`
}

type routerJSON struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

type layoutJSON struct {
	Scheme *schemeJSON `json:"scheme"`
	Shards []shardJSON `json:"shards"`
}

type shardJSON struct {
	Name    string      `json:"name"`
	Backend backendJSON `json:"backend"`
	Fence   string      `json:"fence,omitempty"`
}

type backendJSON struct {
	Host     string         `json:"host"`
	Port     uint16         `json:"port"`
	Database string         `json:"database,omitempty"`
	Replicas []endpointJSON `json:"replicas,omitempty"`
	Tablet   string         `json:"tablet,omitempty"`
}

type endpointJSON struct {
	Host string `json:"host"`
	Port uint16 `json:"port"`
}

type stateJSON struct {
	Phase string `json:"phase"`
	To    uint64 `json:"to,omitempty"`
	Step  string `json:"step,omitempty"`
}

type schemeJSON struct {
	Kind    string          `json:"kind"`
	Vindex  string          `json:"vindex,omitempty"`
	Column  string          `json:"column"`
	Type    string          `json:"type"`
	Tables  []string        `json:"tables,omitempty"`
	Shards  *uint32         `json:"shards,omitempty"`
	Ranges  json.RawMessage `json:"ranges,omitempty"`
	Lists   []listJSON      `json:"lists,omitempty"`
	Default *uint32         `json:"default,omitempty"`
}

type rangeJSON struct {
	Start *valueJSON `json:"start,omitempty"`
	End   *valueJSON `json:"end,omitempty"`
	Shard uint32     `json:"shard"`
}

type listJSON struct {
	Values []valueJSON `json:"values"`
	Shard  uint32      `json:"shard"`
}

type valueJSON struct{ v Value }

func (v valueJSON) MarshalJSON() ([]byte, error) {
	if v.v.isText {
		return json.Marshal(v.v.s)
	}
	return []byte(strconv.FormatInt(v.v.i, 10)), nil
}

func (v *valueJSON) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v.v = Str(s)
		return nil
	}
	i, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("value %s must be a string or an int64 integer", b)
	}
	v.v = Int(i)
	return nil
}

// MarshalJSON writes the JSON form. Unknown enum values are written as Kind(n) so a
// broken record can still be looked at; UnmarshalJSON refuses them.
func (r Record) MarshalJSON() ([]byte, error) {
	out := recordJSON{
		Version: r.Version, Generation: r.Generation, Engine: r.Engine.String(),
		Router: routerJSON{r.Router.Kind.String(), r.Router.Name},
		State:  stateJSON{Phase: r.State.Phase.String(), To: r.State.To},
	}
	if r.State.Step != 0 {
		out.State.Step = r.State.Step.String()
	}
	l := layoutToJSON(r.Layout)
	out.Scheme, out.Shards = l.Scheme, l.Shards
	if r.Target != nil {
		t := layoutToJSON(*r.Target)
		out.Target = &t
	}
	return json.Marshal(out)
}

func layoutToJSON(l Layout) layoutJSON {
	out := layoutJSON{Scheme: schemeToJSON(l.Scheme), Shards: []shardJSON{}}
	for _, s := range l.Shards {
		b := backendJSON{Host: s.Backend.Host, Port: s.Backend.Port, Database: s.Backend.Database, Tablet: s.Backend.Tablet}
		for _, e := range s.Backend.Replicas {
			b.Replicas = append(b.Replicas, endpointJSON(e))
		}
		out.Shards = append(out.Shards, shardJSON{Name: s.Name, Backend: b, Fence: s.Fence.String()})
	}
	return out
}

func schemeToJSON(s Scheme) *schemeJSON {
	if s == nil {
		return nil
	}
	k := s.ShardKey()
	out := &schemeJSON{Kind: SchemeKind(s), Column: k.Column, Type: k.Type.String(), Tables: k.Tables}
	switch s := s.(type) {
	case PgHash:
		n := s.Shards
		out.Shards = &n
	case PgRange:
		rs := make([]rangeJSON, 0, len(s.Ranges))
		for _, r := range s.Ranges {
			j := rangeJSON{Shard: r.Shard}
			if r.Start != nil {
				j.Start = &valueJSON{*r.Start}
			}
			if r.End != nil {
				j.End = &valueJSON{*r.End}
			}
			rs = append(rs, j)
		}
		out.Ranges, _ = json.Marshal(rs)
		out.Default = s.Default
	case PgList:
		for _, l := range s.Lists {
			j := listJSON{Shard: l.Shard, Values: []valueJSON{}}
			for _, v := range l.Values {
				j.Values = append(j.Values, valueJSON{v})
			}
			out.Lists = append(out.Lists, j)
		}
		out.Default = s.Default
	case Vindex:
		out.Vindex = s.Kind.String()
		names := make([]string, 0, len(s.Ranges))
		for _, r := range s.Ranges {
			names = append(names, r.String())
		}
		out.Ranges, _ = json.Marshal(names)
	}
	return out
}

// UnmarshalJSON reads the JSON form strictly: unknown keys, unknown names and fields that do
// not belong to the scheme's kind are errors naming the field. It does not Validate.
func (r *Record) UnmarshalJSON(b []byte) error {
	var in recordJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return fmt.Errorf("%w: %v", ErrJSON, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: trailing data after the record", ErrJSON)
	}
	var p jsonProblems
	out := Record{Version: in.Version, Generation: in.Generation}
	out.Engine = p.enum(engineNames, in.Engine, "engine", false)
	out.Router.Kind = RouterKind(p.enum(routerNames, in.Router.Kind, "router.kind", false))
	out.Router.Name = in.Router.Name
	out.Layout = p.layout("", layoutJSON{in.Scheme, in.Shards})
	out.State.Phase = Phase(p.enum(phaseNames, in.State.Phase, "state.phase", false))
	out.State.To = in.State.To
	out.State.Step = CutoverStep(p.enum(stepNames, in.State.Step, "state.step", true))
	if in.Target != nil {
		t := p.layout("target.", *in.Target)
		out.Target = &t
	}
	if p.err != nil {
		return p.err
	}
	*r = out
	return nil
}

type jsonProblems struct{ err error }

func (p *jsonProblems) fail(field, format string, a ...any) {
	if p.err == nil {
		p.err = fmt.Errorf("%w: %s: %s", ErrJSON, field, fmt.Sprintf(format, a...))
	}
}

func (p *jsonProblems) enum(names []string, s, field string, optional bool) Engine {
	if s == "" && optional {
		return 0
	}
	v, err := parseName[Engine](names, s, field)
	if err != nil {
		p.fail(field, "%v", err)
	}
	return v
}

func (p *jsonProblems) layout(prefix string, in layoutJSON) Layout {
	var l Layout
	l.Scheme = p.scheme(prefix+"scheme", in.Scheme)
	for i, s := range in.Shards {
		f := fmt.Sprintf("%sshards[%d]", prefix, i)
		sh := Shard{Name: s.Name, Fence: FenceOpen}
		if s.Fence != "" {
			sh.Fence = Fence(p.enum(fenceNames, s.Fence, f+".fence", false))
		}
		sh.Backend = Backend{Host: s.Backend.Host, Port: s.Backend.Port, Database: s.Backend.Database, Tablet: s.Backend.Tablet}
		for _, e := range s.Backend.Replicas {
			sh.Backend.Replicas = append(sh.Backend.Replicas, Endpoint(e))
		}
		l.Shards = append(l.Shards, sh)
	}
	return l
}

func (p *jsonProblems) scheme(f string, in *schemeJSON) Scheme {
	if in == nil {
		return nil
	}
	k := Key{Column: in.Column, Tables: in.Tables}
	k.Type = KeyType(p.enum(keyTypeNames, in.Type, f+".type", false))
	only := func(kind string, allowed ...string) {
		present := map[string]bool{"shards": in.Shards != nil, "ranges": in.Ranges != nil, "lists": in.Lists != nil, "default": in.Default != nil, "vindex": in.Vindex != ""}
		for _, name := range []string{"shards", "ranges", "lists", "default", "vindex"} {
			ok := false
			for _, a := range allowed {
				ok = ok || a == name
			}
			if present[name] && !ok {
				p.fail(f+"."+name, "is not a field of a %s scheme", kind)
			}
		}
	}
	switch in.Kind {
	case "pg_hash":
		only(in.Kind, "shards")
		s := PgHash{Key: k}
		if in.Shards == nil {
			p.fail(f+".shards", "is missing; a pg_hash scheme needs its shard count")
		} else {
			s.Shards = *in.Shards
		}
		return s
	case "pg_range":
		only(in.Kind, "ranges", "default")
		s := PgRange{Key: k, Default: in.Default}
		var rs []rangeJSON
		if err := strictUnmarshal(in.Ranges, &rs); err != nil {
			p.fail(f+".ranges", "%v", err)
		}
		for _, r := range rs {
			rr := RangeRule{Shard: r.Shard}
			if r.Start != nil {
				rr.Start = &r.Start.v
			}
			if r.End != nil {
				rr.End = &r.End.v
			}
			s.Ranges = append(s.Ranges, rr)
		}
		return s
	case "pg_list":
		only(in.Kind, "lists", "default")
		s := PgList{Key: k, Default: in.Default}
		for _, l := range in.Lists {
			lr := ListRule{Shard: l.Shard}
			for _, v := range l.Values {
				lr.Values = append(lr.Values, v.v)
			}
			s.Lists = append(s.Lists, lr)
		}
		return s
	case "vindex":
		only(in.Kind, "ranges", "vindex")
		s := Vindex{Key: k}
		s.Kind = VindexKind(p.enum(vindexNames, in.Vindex, f+".vindex", false))
		var names []string
		if err := strictUnmarshal(in.Ranges, &names); err != nil {
			p.fail(f+".ranges", "want a list of shard names such as [\"-80\",\"80-\"]: %v", err)
		}
		for i, n := range names {
			r, err := keyrange.Parse(n)
			if err != nil {
				p.fail(fmt.Sprintf("%s.ranges[%d]", f, i), "%v", err)
				continue
			}
			s.Ranges = append(s.Ranges, r)
		}
		return s
	}
	p.fail(f+".kind", "unknown scheme kind %q (one of pg_hash, pg_range, pg_list, vindex)", in.Kind)
	return nil
}

func strictUnmarshal(b []byte, v any) error {
	if len(b) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
