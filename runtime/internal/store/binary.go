package store

// Columns of text (payload, headers, last_error) are selected as CAST(... AS BINARY): the server
// converts text columns of a result set to the connection's charset, so a DSN with charset=utf8
// or latin1 would turn an emoji into '?'. A binary column comes back byte for byte. sqlc types
// such a column as interface{}; these two give it its type back.

// Bytes returns a column selected as binary, or nil for NULL.
func Bytes(v interface{}) []byte {
	switch b := v.(type) {
	case []byte:
		return b
	case string:
		return []byte(b)
	}
	return nil
}

// Text returns a column selected as binary as a string, or "" for NULL.
func Text(v interface{}) string {
	switch b := v.(type) {
	case []byte:
		return string(b)
	case string:
		return b
	}
	return ""
}
