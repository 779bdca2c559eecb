package refrouter

import (
	"errors"
	"fmt"
	"strings"
)

// The reference router parses no SQL: a client names the statement's sharding key in a
// leading comment, the way PgDog's manual routing does,
//
//	/* pgdog_sharding_key: 1234 */ INSERT INTO t (id, v) VALUES (1234, 'x')
//
// and the statement, comment included, goes to the shard of that key. A value with
// spaces, a '*' or a quote is written as an SQL string: /* pgdog_sharding_key: 'a b' */.

// ShardingKeyComment is the comment's keyword.
const ShardingKeyComment = "pgdog_sharding_key"

// ErrNoShardingKey: the statement does not begin with a sharding key comment.
var ErrNoShardingKey = errors.New("refrouter: the statement names no sharding key; begin it with /* pgdog_sharding_key: <value> */")

// WithShardingKey prefixes sql with the comment naming key (as ParseShardingKey reads it).
func WithShardingKey(key any, sql string) (string, error) {
	text, err := keyText(key)
	if err != nil {
		return "", err
	}
	return "/* " + ShardingKeyComment + ": '" + strings.ReplaceAll(text, "'", "''") + "' */ " + sql, nil
}

// ParseShardingKey reads the leading sharding key comment of sql and returns the key's
// text (as Database.Shard takes it). Anything but one well-formed comment first is an
// error matching ErrNoShardingKey, naming what is wrong.
func ParseShardingKey(sql string) (string, error) {
	bad := func(why string) (string, error) {
		return "", fmt.Errorf("%w (%s)", ErrNoShardingKey, why)
	}
	s := strings.TrimLeft(sql, " \t\r\n")
	rest, ok := strings.CutPrefix(s, "/*")
	if !ok {
		return bad("no leading comment")
	}
	rest = strings.TrimLeft(rest, " \t\r\n")
	if rest, ok = strings.CutPrefix(rest, ShardingKeyComment); !ok {
		return bad("the leading comment is not " + ShardingKeyComment)
	}
	rest = strings.TrimLeft(rest, " \t")
	if rest, ok = strings.CutPrefix(rest, ":"); !ok {
		return bad("want a colon after " + ShardingKeyComment)
	}
	rest = strings.TrimLeft(rest, " \t")
	var key string
	if strings.HasPrefix(rest, "'") {
		var b strings.Builder
		i := 1
		for {
			j := strings.IndexByte(rest[i:], '\'')
			if j < 0 {
				return bad("unterminated quoted value")
			}
			b.WriteString(rest[i : i+j])
			i += j + 1
			if strings.HasPrefix(rest[i:], "'") { // '' is a quote
				b.WriteByte('\'')
				i++
				continue
			}
			break
		}
		key, rest = b.String(), rest[i:]
	} else {
		end := strings.IndexAny(rest, " \t\r\n*'")
		if end < 0 {
			return bad("unterminated comment")
		}
		key, rest = rest[:end], rest[end:]
	}
	if key == "" {
		return bad("empty value")
	}
	rest = strings.TrimLeft(rest, " \t\r\n")
	if !strings.HasPrefix(rest, "*/") {
		return bad("want */ after the value")
	}
	return key, nil
}
