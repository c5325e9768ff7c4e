module github.com/outboxgen/outboxgen

go 1.24.0

require (
	github.com/dave/jennifer v1.7.1
	github.com/go-sql-driver/mysql v1.10.1
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3
	golang.org/x/mod v0.24.0
	gopkg.in/yaml.v3 v3.0.1
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	golang.org/x/text v0.14.0 // indirect
)
