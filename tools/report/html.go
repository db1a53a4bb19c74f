package report

// html.go: index.html, a single self-contained page (inline CSS, relative
// image links, no scripts or external assets) that shows the key numbers of
// the paper's measurements, every figure with its caption, the figures that
// were skipped and why, and each run's config.yaml.

import (
	"bytes"
	"fmt"
	"html/template"
	"strings"
)

type htmlFigure struct {
	Name, Title, Caption, PNG, SVG string
	W, H                           int
}

type htmlSection struct {
	ID, Title string
	Figures   []htmlFigure
	Skipped   []Skipped
}

type htmlRun struct {
	Name, Method, Steps, Bins, Metrics, Validation, ConfigPath, Config, ConfigNote string
	Notes                                                                          []string
}

type htmlPage struct {
	Title    string
	Compare  bool
	Runs     []htmlRun
	Measures []Measure
	Sections []htmlSection
}

var indexTmpl = template.Must(template.New("index").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
body { font-family: "Liberation Sans", Arial, Helvetica, sans-serif; margin: 1.5em auto; max-width: 1000px; padding: 0 1em; color: #222; line-height: 1.4; }
h1 { font-size: 1.5em; } h2 { font-size: 1.25em; border-bottom: 1px solid #ccc; padding-bottom: .2em; margin-top: 2em; }
table { border-collapse: collapse; margin: .5em 0; } td, th { border: 1px solid #ccc; padding: .25em .6em; text-align: left; vertical-align: top; font-size: .92em; }
figure { margin: 1.5em 0; } figure img { width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: .92em; color: #333; margin-top: .3em; }
.skipped { background: #fff8e1; border-left: 4px solid #e6a100; padding: .4em .8em; font-size: .92em; }
.notes { color: #555; font-size: .92em; }
pre { background: #f6f6f6; padding: .8em; overflow-x: auto; font-size: .85em; }
nav a { margin-right: 1em; }
code { font-size: .95em; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
<table>
<tr><th>run</th><th>method</th><th>steps</th><th>bins</th><th>metrics</th><th>validation</th></tr>
{{range .Runs}}<tr><td>{{.Name}}</td><td>{{.Method}}</td><td>{{.Steps}}</td><td>{{.Bins}}</td><td><code>{{.Metrics}}</code></td><td>{{.Validation}}</td></tr>
{{end}}</table>
{{range .Runs}}{{if .Notes}}<ul class="notes">{{range .Notes}}<li>{{.}}</li>{{end}}</ul>{{end}}{{end}}
<p class="notes">Accuracy bins: bin 0 (<code>accbin_0</code>) holds the prompts with the lowest estimated solve rate, i.e. the hardest;
<code>excl</code> is <code>accbin_excl</code>, prompts the classifier excludes (always or never solved). Click a figure for its SVG.</p>
{{if .Measures}}<h2 id="measures">Key numbers: the paper's measurements</h2>
<p class="notes">Definitions: docs/algorithm.md §8.1. Bin 0 is the hardest.</p>
<table>
<tr><th>measure</th><th>value</th><th>how</th></tr>
{{range .Measures}}<tr><td>{{.Name}}</td><td>{{.Value}}</td><td>{{.Note}}</td></tr>
{{end}}</table>
{{end}}<nav>{{if .Measures}}<a href="#measures">Key numbers</a>{{end}}{{range .Sections}}<a href="#{{.ID}}">{{.Title}}</a>{{end}}<a href="#config">Config</a></nav>
{{range .Sections}}
<h2 id="{{.ID}}">{{.Title}}</h2>
{{if .Skipped}}<div class="skipped">Not drawn:<ul>{{range .Skipped}}<li><b>{{.Title}}</b> — {{.Reason}}</li>{{end}}</ul></div>{{end}}
{{range .Figures}}<figure id="{{.Name}}">
<a href="{{.SVG}}"><img src="{{.PNG}}" width="{{.W}}" height="{{.H}}" alt="{{.Title}}"></a>
<figcaption><b>{{.Title}}.</b> {{.Caption}} <a href="{{.SVG}}">SVG</a> · <a href="{{.PNG}}">PNG</a></figcaption>
</figure>
{{end}}{{end}}
<h2 id="config">Config</h2>
{{range .Runs}}{{if .Config}}<details{{if not $.Compare}} open{{end}}><summary>{{.Name}}: <code>{{.ConfigPath}}</code></summary>
<pre>{{.Config}}</pre></details>
{{else}}<p class="notes">{{.Name}}: {{.ConfigNote}}</p>
{{end}}{{end}}
</body>
</html>
`))

// HTML renders index.html.
func (r *Report) HTML() string {
	pg := htmlPage{Title: r.Title, Compare: r.Compare, Measures: r.Measures}
	for _, run := range r.Runs {
		hr := htmlRun{Name: run.Name, Method: run.Method(), Metrics: run.MetricsPath,
			Bins:       fmt.Sprintf("%d (%s)", len(run.Labels), strings.Join(run.Labels, ", ")),
			Validation: "none", ConfigPath: run.ConfigPath, Config: run.Config, Notes: run.Notes}
		hr.ConfigNote = "no config.yaml in " + run.Dir
		if run.Dir == "" {
			hr.ConfigNote = "no config.yaml: " + run.MetricsPath + " is a metrics file (gdro-sim and gdro-replay take their settings from the command line)"
		}
		hr.Steps = "none (no step records)"
		if n := len(run.Records); n > 0 {
			hr.Steps = fmt.Sprintf("%d–%d (%d records)", run.Records[0].Step, run.Records[n-1].Step, n)
		}
		if len(run.Val) > 0 {
			hr.Validation = fmt.Sprintf("%d evaluations, %d benchmarks", len(run.Val), len(run.Benchmarks()))
		}
		pg.Runs = append(pg.Runs, hr)
	}
	for i, title := range sections {
		sec := htmlSection{ID: fmt.Sprintf("s%d", i+1), Title: title}
		for _, f := range r.Figures {
			if f.Section != title {
				continue
			}
			png, svg := f.Files()
			w, h := f.PixelSize()
			sec.Figures = append(sec.Figures, htmlFigure{Name: f.Name, Title: f.Title, Caption: f.Caption, PNG: png, SVG: svg, W: w, H: h})
		}
		for _, s := range r.Skipped {
			if s.Section == title {
				sec.Skipped = append(sec.Skipped, s)
			}
		}
		if len(sec.Figures) > 0 || len(sec.Skipped) > 0 {
			pg.Sections = append(pg.Sections, sec)
		}
	}
	var b bytes.Buffer
	if err := indexTmpl.Execute(&b, pg); err != nil {
		// The template is constant and the data are strings and ints.
		panic(fmt.Sprintf("report: index.html template: %v", err))
	}
	return b.String()
}
