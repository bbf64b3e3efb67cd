module barn.dev/barn-node

go 1.26.8

require barn.dev/lib v0.0.0

require github.com/rogpeppe/go-internal v1.16.0 // indirect

replace barn.dev/lib => ../lib
