"""`runoff report`: one self-contained HTML page with charts of a dataset's runs.

Owns: reading and shaping (`data`: delta-rs, pandas, no Spark), drawing (`charts`: matplotlib to
inline SVG), rendering (`page`: Jinja2, `templates/report.html.j2`) and the command (`build`).
Imports `jobs.ops` (a table's facts) and what it imports.
"""
