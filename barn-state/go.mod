module barn.dev/barn-state

go 1.26.8

require barn.dev/lib v0.0.0

replace barn.dev/lib => ../lib
