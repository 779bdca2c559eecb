module loam.dev/router

go 1.26

require (
	github.com/cockroachdb/datadriven v1.0.3
	github.com/stretchr/testify v1.12.1
	pgregory.net/rapid v1.3.0
)

require (
	github.com/pmezard/go-difflib v1.0.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)
