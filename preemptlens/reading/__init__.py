"""The reading layer: what every outlet needs when data leaves for a reader, once, in the core.

- who may see what: `preemptlens.reading.masking` (the one masking rule, its setting and a reader's scope);
- how each figure reads: `preemptlens.reading.words` (one wording of a duration, a quantity, a signed change,
  a readiness measure);
- escaping per format: `preemptlens.escape` (Markdown, Slack, HTML, CSV).

Pages, the weekly report, victim notices, /metrics, /live-costs and the commands reach it without an arrow
pointing up: it imports nothing but the core.
"""
