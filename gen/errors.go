package gen

import (
	"fmt"
	"sort"
	"strings"
)

// Error is one problem in a catalog, at a line and column of the file as it was named to the
// generator.
type Error struct {
	Path      string
	Line, Col int
	Msg       string
}

// Error formats e the way go build does: path:line:col: message.
func (e *Error) Error() string { return fmt.Sprintf("%s:%d:%d: %s", e.Path, e.Line, e.Col, e.Msg) }

// ErrorList is every problem found in a catalog, in file order.
type ErrorList []*Error

// Error prints one problem per line.
func (l ErrorList) Error() string {
	lines := make([]string, len(l))
	for i, e := range l {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

func (l ErrorList) sort() {
	sort.SliceStable(l, func(i, j int) bool {
		if l[i].Line != l[j].Line {
			return l[i].Line < l[j].Line
		}
		return l[i].Col < l[j].Col
	})
}
