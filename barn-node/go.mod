module barn.dev/barn-node

go 1.26.8

require barn.dev/lib v0.0.0

replace barn.dev/lib => ../lib
