package indoubt

import (
	"fmt"
	"strings"
)

// The String methods render commands as one line each, for logs and the interaction
// scripts under testdata/.

func (c ListPrepared) String() string {
	return fmt.Sprintf("ListPrepared step=%s shard=%s", c.Step, c.Shard)
}

func (c ListInstances) String() string { return "ListInstances step=" + c.Step }

func (c Alert) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Alert step=%s id=%s reason=%s since=%d", c.Step, c.ID, c.Reason, c.Since)
	for _, t := range c.Txns {
		fmt.Fprintf(&b, " txn=%s@%d(", t.Name, t.Prepared)
		for i, p := range t.Parts {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(p.Shard + ":" + p.GID)
		}
		b.WriteByte(')')
	}
	return b.String()
}

func (c ClearAlert) String() string { return "ClearAlert step=" + c.Step + " id=" + c.ID }

func (c SetTimer) String() string { return fmt.Sprintf("SetTimer id=%s at=%d", c.ID, c.At) }
