module train

go 1.26

require (
	github.com/cpuguy83/go-md2man/v2 v2.0.7 // indirect
	github.com/nlpodyssey/safetensors v0.0.0-20250209183917-bfb01cc25f7c // indirect
	github.com/russross/blackfriday/v2 v2.1.0 // indirect
	github.com/sbromberger/gompi v0.2.0 // indirect
	github.com/urfave/cli/v2 v2.27.7 // indirect
	github.com/xrash/smetrics v0.0.0-20240521201337-686a1a2994c1 // indirect
	gonum.org/v1/gonum v0.17.0 // indirect
)
