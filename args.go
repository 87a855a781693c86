package main

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// hoistFlags lets commands that take positional arguments be written the
// usual way, `train plot run.jsonl -o curves.png`: urfave/cli stops
// reading flags at the first positional argument, so the arguments after
// the command's name are reordered, its flags (with their values) first.
// A flag takes a value unless it is a BoolFlag; "--" ends the flags.
// cmds is keyed by the command's path: "plot", "timeline plot".
func hoistFlags(args []string, cmds map[string]*cli.Command) []string {
	for i, a := range args {
		cmd, ok := cmds[a]
		if i > 0 {
			if sub, ok2 := cmds[args[i-1]+" "+a]; ok2 {
				cmd, ok = sub, true
			}
		}
		{
			if !ok {
				continue
			}
			takesValue := map[string]bool{}
			for _, f := range cmd.Flags {
				_, isBool := f.(*cli.BoolFlag)
				for _, n := range f.Names() {
					takesValue[n] = !isBool
				}
			}
			var flags, pos []string
			rest := args[i+1:]
			for j := 0; j < len(rest); j++ {
				t := rest[j]
				if t == "--" {
					pos = append(pos, rest[j+1:]...)
					break
				}
				name := strings.TrimLeft(t, "-")
				if !strings.HasPrefix(t, "-") || name == "" {
					pos = append(pos, t)
					continue
				}
				flags = append(flags, t)
				if !strings.Contains(name, "=") && takesValue[name] && j+1 < len(rest) {
					flags = append(flags, rest[j+1])
					j++
				}
			}
			out := append(append([]string{}, args[:i+1]...), flags...)
			return append(out, pos...)
		}
	}
	return args
}
