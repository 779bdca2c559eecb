package merge

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
)

// MaxLine is the longest request line Serve reads; a longer one is answered with bad_request.
const MaxLine = 64 << 20

// Serve answers request lines from r on w, one response line per request line, in order, until
// r ends. Blank lines get no response. It flushes whenever it has answered everything r has
// delivered so far, so a client may send one line and wait for its answer. It returns nil at
// the end of r, or the first read or write error.
func Serve(r io.Reader, w io.Writer) error { return serve(r, w, MaxLine) }

func serve(r io.Reader, w io.Writer, maxLine int) error {
	br := bufio.NewReaderSize(r, 64<<10)
	bw := bufio.NewWriterSize(w, 64<<10)
	var line, out []byte
	for {
		line = line[:0]
		tooLong := false
		var err error
		for {
			var chunk []byte
			chunk, err = br.ReadSlice('\n')
			if len(line)+len(chunk) > maxLine {
				tooLong = true
			} else {
				line = append(line, chunk...)
			}
			if err != bufio.ErrBufferFull {
				break
			}
		}
		if err != nil && err != io.EOF {
			return fmt.Errorf("merge: reading requests: %w", err)
		}
		switch {
		case tooLong:
			out = appendError(out[:0], KindBadRequest, fieldErrorf("", "the line is longer than %d bytes", maxLine))
		case len(bytes.TrimSpace(line)) == 0:
			out = out[:0]
		default:
			out = Respond(out[:0], line)
		}
		if _, werr := bw.Write(out); werr != nil {
			return fmt.Errorf("merge: writing a response: %w", werr)
		}
		if err == io.EOF || br.Buffered() == 0 {
			if ferr := bw.Flush(); ferr != nil {
				return fmt.Errorf("merge: writing a response: %w", ferr)
			}
		}
		if err == io.EOF {
			return nil
		}
	}
}
