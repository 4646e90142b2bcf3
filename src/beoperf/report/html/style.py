"""The report's one stylesheet (inline in the page: no file, no request).

Colours ``c0`` .. ``c9`` are matplotlib's tab10 (the PNG graphs of `beoperf plot` use the
same), shared by lines, bands, bars and legend swatches.  For print: no background
tints except the answer's marks, every collapsible block open, a study never
starts at the bottom of a page with its title alone, a plot never split.
"""

from __future__ import annotations

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf")

_COLOURS = "".join(
    f".c{i}{{stroke:{c};fill:{c};color:{c}}}.sw.c{i}{{background:{c}}}"
    for i, c in enumerate(PALETTE))

CSS = """
:root{--fg:#1b1f24;--muted:#59636e;--line:#d0d7de;--tint:#f6f8fa;--warn:#9a6700;
--warnbg:#fff8c5;--bad:#cf222e;--ok:#1a7f37;--link:#0550ae}
*{box-sizing:border-box}
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;
color:var(--fg);margin:0 auto;max-width:1280px;padding:1.2em 1.6em 3em}
h1{font-size:1.8em;margin:.2em 0 .4em}
h2{font-size:1.35em;margin:1.6em 0 .5em;border-bottom:1px solid var(--line);padding-bottom:.2em}
h3{font-size:1.08em;margin:1.2em 0 .4em}
a{color:var(--link);text-decoration:none}a:hover{text-decoration:underline}
code{font:13px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:var(--tint);
padding:.1em .3em;border-radius:4px;word-break:break-all}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:.15em 1em;margin:.4em 0}
dl.facts dt{color:var(--muted)}dl.facts dd{margin:0}
dl.prov{font-size:.9em}
p.cmd{font-size:.9em;margin:.3em 0 .8em}p.cmd .lbl{color:var(--muted)}
p.none,p.generic{color:var(--muted)}
.tablewrap{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;margin:.5em 0 1em;font-size:.9em;
font-variant-numeric:tabular-nums}
caption{text-align:left;font-weight:600;padding:.2em 0}
th,td{border-bottom:1px solid var(--line);padding:.25em .6em;text-align:left;vertical-align:top}
th{background:var(--tint);font-weight:600}
td.r,th.r{text-align:right;white-space:nowrap}
tr.bad td{background:#ffebe9}tr.warn td{background:#fff8c5}tr.base td{font-weight:600}
.mark{display:inline-block;padding:0 .45em;border-radius:3px;font-size:.85em;font-weight:600}
.mark.ok{color:var(--ok)}.mark.warn{color:var(--warn);background:var(--warnbg)}
.mark.bad{color:#fff;background:var(--bad)}.mark.unk{color:var(--muted)}
.mark.imprecise{color:#0a3069;background:#ddf4ff}
.answer{border-left:4px solid var(--line);padding:.2em .9em;margin:.4em 0 1em}
ul.verdicts{list-style:none;margin:.2em 0;padding:0}
ul.verdicts li{margin:.3em 0;display:grid;grid-template-columns:6.6em 1fr;column-gap:.6em;
align-items:baseline}
ul.verdicts .mark{text-align:center;padding:0 .3em}
ul.verdicts .todo{grid-column:2;color:var(--muted);font-size:.92em}
ul.verdicts .todo .lbl{font-weight:600}
section.top{border:1px solid var(--line);border-radius:6px;padding:.3em 1em .5em;
margin:.6em 0 1.2em}
section.top h2{margin:.3em 0 .4em;border:none}
section.top details{margin:.3em 0}
nav ul.toc{list-style:none;padding-left:0}nav ul.toc>li{margin:.4em 0}
nav .group{font-weight:600}nav ol{margin:.2em 0;padding-left:1.4em;list-style:none}
.badge{display:inline-block;margin-left:.5em;font-size:.78em;padding:0 .45em;
border-radius:8px;background:var(--warnbg);color:var(--warn);border:1px solid #d4a72c}
.badge.fail{background:#ffebe9;color:var(--bad);border-color:var(--bad)}
.badge.imprecise{background:#ddf4ff;color:#0a3069;border-color:#54aeff}
.badge.note{background:var(--tint);color:var(--muted);border-color:var(--line)}
section.study{margin-top:2.2em}
figure.plot{margin:1em 0 1.4em;break-inside:avoid}
figcaption{font-size:.88em;color:var(--muted);max-width:760px}
svg.chart{width:100%;max-width:760px;height:auto;display:block;background:#fff}
svg .frame{fill:none;stroke:#8c959f}svg .grid{stroke:#eaeef2}
svg text{font:11px system-ui,sans-serif;fill:var(--fg)}svg .title{font-size:13px;font-weight:600}
svg .label{font-size:12px}svg .tick{fill:var(--muted)}svg .note{font-size:13px;fill:var(--muted)}
svg .line{fill:none;stroke-width:1.8}svg .band{stroke:none;fill-opacity:.18}
svg .pt{stroke:#fff;stroke-width:.8}svg .pt:hover{r:5}
svg .mark{fill:none;stroke-width:2}svg .dots{stroke:none}
svg .span rect{fill:#d62728;fill-opacity:.10}svg .span text{fill:#a40e26;font-size:10px}
svg .gap rect{fill:#8c959f;fill-opacity:.18}svg .gap text{fill:var(--muted);font-size:10px}
svg .event rect{fill:#ff7f0e;fill-opacity:.16}svg .event text{fill:#bc4c00;font-size:10px}
svg .bar{stroke:none}

ul.legend{list-style:none;padding:0;margin:.2em 0;display:flex;flex-wrap:wrap;gap:.2em 1.2em}
.sw{display:inline-block;width:14px;height:10px;margin-right:.4em;border-radius:2px;
vertical-align:baseline}
.sw.bandsw{background:#1f77b4;opacity:.25}.sw.spansw{background:#d62728;opacity:.25}
.sw.gapsw{background:#8c959f;opacity:.35}.sw.eventsw{background:#ff7f0e;opacity:.35}
.n{font-variant-numeric:tabular-nums}.na{color:var(--muted)}
details{margin:.4em 0 1em}summary{cursor:pointer;color:var(--link)}
.headline td:first-child{color:var(--muted)}
footer{margin-top:3em;color:var(--muted);font-size:.85em;border-top:1px solid var(--line)}
@media print{
body{max-width:none;padding:0;font-size:11pt}
a{color:var(--fg)}nav a::after{content:""}
h2{break-after:avoid}section.study{break-before:auto}
table,figure,.answer,dl{break-inside:avoid}
details>summary{list-style:none;color:var(--fg);font-weight:600}details{display:block}
details::details-content{content-visibility:visible;display:block}
th{background:none}tr.bad td,tr.warn td{background:none}
.tablewrap{overflow:visible}table{font-size:8.5pt}
svg .pt:hover{r:3}
@page{margin:1.5cm}}
""" + _COLOURS
