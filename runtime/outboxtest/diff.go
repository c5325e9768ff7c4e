package outboxtest

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
)

// diff returns one line per field of got that differs from want, "Path: got X, want Y", with
// paths as Go writes them (Total.Amount, Items[1].SKU, Tags["a"]); nil when they are equal.
func diff(got, want any) []string {
	var out []string
	diffValue(&out, "", reflect.ValueOf(got), reflect.ValueOf(want))
	return out
}

func diffValue(out *[]string, path string, got, want reflect.Value) {
	leaf := func() {
		name := path
		if name == "" {
			name = "value"
		}
		*out = append(*out, fmt.Sprintf("%s: got %s, want %s", name, showValue(got), showValue(want)))
	}
	if !got.IsValid() || !want.IsValid() {
		if got.IsValid() != want.IsValid() {
			leaf()
		}
		return
	}
	if eq, ok := equalMethod(got, want); ok {
		if !eq {
			leaf()
		}
		return
	}
	switch got.Kind() {
	case reflect.Pointer, reflect.Interface:
		if got.IsNil() || want.IsNil() {
			if got.IsNil() != want.IsNil() {
				leaf()
			}
			return
		}
		if got.Kind() == reflect.Interface && got.Elem().Type() != want.Elem().Type() {
			leaf()
			return
		}
		diffValue(out, path, got.Elem(), want.Elem())
	case reflect.Struct:
		t := got.Type()
		for i := 0; i < t.NumField(); i++ {
			if !t.Field(i).IsExported() {
				// A type with hidden state is compared whole, as DeepEqual does.
				if !reflect.DeepEqual(got.Interface(), want.Interface()) {
					leaf()
				}
				return
			}
		}
		for i := 0; i < t.NumField(); i++ {
			diffValue(out, join(path, t.Field(i).Name), got.Field(i), want.Field(i))
		}
	case reflect.Slice, reflect.Array:
		if got.Len() != want.Len() {
			leaf()
			return
		}
		for i := 0; i < got.Len(); i++ {
			diffValue(out, path+"["+strconv.Itoa(i)+"]", got.Index(i), want.Index(i))
		}
	case reflect.Map:
		keys := map[string]reflect.Value{}
		for _, k := range append(got.MapKeys(), want.MapKeys()...) {
			keys[showValue(k)] = k
		}
		names := make([]string, 0, len(keys))
		for n := range keys {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			k := keys[n]
			g, w := got.MapIndex(k), want.MapIndex(k)
			p := path + "[" + n + "]"
			if !g.IsValid() || !w.IsValid() {
				*out = append(*out, fmt.Sprintf("%s: got %s, want %s", p, showEntry(g), showEntry(w)))
				continue
			}
			diffValue(out, p, g, w)
		}
	default:
		if !reflect.DeepEqual(got.Interface(), want.Interface()) {
			leaf()
		}
	}
}

// equalMethod compares with the type's own Equal(T) bool when it has one: time.Time values
// that are the same instant in different locations are equal.
func equalMethod(got, want reflect.Value) (equal, ok bool) {
	m, ok := got.Type().MethodByName("Equal")
	if !ok || !got.CanInterface() {
		return false, false
	}
	ft := m.Type // receiver first
	if ft.NumIn() != 2 || ft.In(1) != got.Type() || ft.NumOut() != 1 || ft.Out(0).Kind() != reflect.Bool {
		return false, false
	}
	if got.Kind() == reflect.Pointer && (got.IsNil() || want.IsNil()) {
		return got.IsNil() == want.IsNil(), true
	}
	return got.Method(m.Index).Call([]reflect.Value{want})[0].Bool(), true
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// showEntry shows a map value, or that the key is absent.
func showEntry(v reflect.Value) string {
	if !v.IsValid() {
		return "no entry"
	}
	return showValue(v)
}

// showValue writes v as Go source would (%#v): strings are quoted, so a payload's text cannot
// break the test's output with a newline or a terminal escape.
func showValue(v reflect.Value) string {
	if !v.IsValid() {
		return "nil"
	}
	for v.Kind() == reflect.Pointer && !v.IsNil() {
		v = v.Elem()
	}
	if !v.CanInterface() {
		return v.String()
	}
	return show(v.Interface())
}

func show(x any) string {
	if s, ok := x.(string); ok {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%#v", x)
}
