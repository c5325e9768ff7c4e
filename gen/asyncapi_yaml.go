package gen

import (
	"fmt"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"
)

// yamlMap builds a mapping node in insertion order.
type yamlMap struct{ n *yaml.Node }

func ymap() *yamlMap { return &yamlMap{&yaml.Node{Kind: yaml.MappingNode}} }

func (m *yamlMap) add(key string, v *yaml.Node) *yamlMap {
	m.n.Content = append(m.n.Content, ystr(key), v)
	return m
}

func (m *yamlMap) node() *yaml.Node { return m.n }

// yaml11Special matches the plain scalars a YAML 1.1 parser (PyYAML, SnakeYAML) reads as
// something other than a string although YAML 1.2 reads them as strings: yes, no, on, off,
// y, n in any case, and numbers in 1.1's syntaxes (1_000, 1:30, 0b1).
var yaml11Special = regexp.MustCompile(`^(?i:y|n|yes|no|on|off|true|false|null|~|=|<<)$|^[-+.]?[0-9]`)

// ystr is a string scalar. Strings that a YAML 1.1 parser would read as another type are
// double-quoted, so the document means the same to every YAML parser.
func ystr(s string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
	if s == "" || yaml11Special.MatchString(s) {
		n.Style = yaml.DoubleQuotedStyle
	}
	return n
}

// ytext is a description: a literal block when it has several lines.
func ytext(s string) *yaml.Node {
	n := ystr(s)
	if strings.Contains(s, "\n") {
		n.Style = yaml.LiteralStyle
	}
	return n
}

func yint(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: s} }

func ybool(b bool) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: fmt.Sprint(b)}
}

func yseq(items ...*yaml.Node) *yaml.Node {
	return &yaml.Node{Kind: yaml.SequenceNode, Content: items}
}

func yflow(items ...*yaml.Node) *yaml.Node {
	return &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle, Content: items}
}

func yref(ref string) *yaml.Node { return ymap().add("$ref", ystr(ref)).node() }
