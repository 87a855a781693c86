package main

import (
	"encoding/json"
	"fmt"

	"github.com/urfave/cli/v2"

	"train/flightrec"
)

// doctorCommand reads a job's flight recorder dumps and says where the
// ranks parted: who is behind, who called something else, who was slow.
var doctorCommand = &cli.Command{
	Name:      "doctor",
	Usage:     "explain a stalled or slow job from its flight recorder dumps (--flight-dir): the rank that is behind and the call it never made, ranks in different calls, the rank the others waited for",
	UsageText: "train doctor flight/    (or: train doctor --json ck/flight)",
	Flags: []cli.Flag{
		&cli.BoolFlag{Name: "json", Usage: "print the findings as JSON"},
	},
	Action: func(c *cli.Context) error {
		if c.NArg() != 1 {
			return fmt.Errorf("train doctor: name one directory of flight-rank*.json dumps (--flight-dir; by default flight/ in --checkpoint-dir, or ./flight)")
		}
		ds, err := flightrec.Read(c.Args().First())
		if err != nil {
			return err
		}
		rep := flightrec.Diagnose(ds)
		w := c.App.Writer
		if c.Bool("json") {
			enc := json.NewEncoder(w)
			enc.SetIndent("", " ")
			return enc.Encode(rep)
		}
		for _, l := range rep.Lines() {
			fmt.Fprintln(w, l)
		}
		return nil
	},
}
