"""`genenv report`'s page: one self-contained HTML page with the curriculum's charts, plus each chart as a PNG.

    genenv report [--run DIR] [--out FILE]      # default RUN/report/report.html, PNGs beside it

Reads the run (and the command, `actions/report.py`, writes only the report's files): `epochs/NNNN/metrics.json`
(keys in `genenv_cli.rundir.metrics`), `epochs/NNNN/task_stats.parquet` (schema in `genenv_cli.rundir.schemas`) and
`evals/<bench>/<model-tag>.json` (written by `genenv evaluate`; the `*.samples.jsonl` beside them are ignored).

The charts are the views the GenEnv paper (arXiv 2512.19682) uses to show the co-evolution, per epoch:
the agent's success on generated tasks against alpha (the paper's curve, 0.138 -> 0.524 over 6 epochs, is
drawn for reference and labelled as such), the distribution of task p-hat with the band, the share of
tasks in the band, mean R_env, the valid-generation rate, task and response length (the paper: response
length +49% over 6 epochs), the agent's training reward, the environment's KL (epochs stopped by
`env_update.kl_max` marked), a mixed run's numbers per domain (metrics.json's `by_domain`; the section is left
out for a single domain), and benchmark scores across epochs. Under every chart is a table of the
numbers drawn; `actions.report.build_report` also returns them.

The page opens offline: CSS inline, no script, images embedded as base64 PNG. A null number (a stage that
has not run) is a gap in the chart and "-" in the table, never 0. An epoch without task_stats.parquet is
left out of the p-hat chart and named; a run with no epoch yet gives a page that says so.

Plotting: matplotlib's object API on the Agg canvas (`charts.py`), imported only when a report is built.

The package: `read` (the run's numbers, checked), `numbers` (the numbers behind each chart), `html` (the page's
kit: escaping, cell formats, tables, embedded images, the stylesheet; `genenv compare` uses it too), `sections`
(one builder per chart section), `charts` (the plots) and `build` (`report_page`: the page and its charts, in
memory).
"""

from genenv_cli.views.report.read import read_evals, read_metrics, read_task_stats

__all__ = ["read_evals", "read_metrics", "read_task_stats"]
