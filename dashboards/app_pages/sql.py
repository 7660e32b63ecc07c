"""SQL: ad-hoc read-only queries over the warehouse snapshot, with the views listed and CSV download."""

from __future__ import annotations

import streamlit as st

from preemptlens.dashboards.data import adhoc
from preemptlens.dashboards.views_common import context, md, show_table
from preemptlens.errors import PreemptlensError
from preemptlens.escape import csv_text
from preemptlens.readonly import named_queries

DEFAULT = "SELECT * FROM preemption_ledger ORDER BY time DESC LIMIT 100"

ctx = context()
st.title("SQL")
st.caption(
    f"One SELECT (or WITH … SELECT) over the latest snapshot, read-only, run in a process of its own; at most "
    f"{ctx.limits.max_rows:,} rows, {ctx.limits.max_result_bytes} and {ctx.limits.timeout_s:g} s (sql.max_rows, "
    "sql.max_result_bytes, sql.timeout_s). The sidebar filters do not apply here."
)

examples = named_queries()
left, right = st.columns([3, 2])
with right:
    st.markdown("**Views and tables**")
    catalog = ctx.q("catalog")
    # A definition is a paragraph: a grid cell would cut it, so it is read whole below the grid.
    show_table(catalog, {"name": ("Name (to query)", "text"), "kind": ("Kind", "text")}, key="catalog", height=320)
    defined = dict(zip(catalog["name"].to_list(), catalog["definition"].to_list(), strict=True))
    read = st.selectbox("Definition of", ["", *defined], key="definition")
    if read:
        st.caption(md(defined[read] or "no definition"))
    pick = st.selectbox("Example queries", ["", *examples], key="example",
                        format_func=lambda n: n and f"{n} — {examples[n][0]}")
with left:
    text = st.text_area("Query", value=examples[pick][1] if pick else DEFAULT, height=220, key=f"sql_{pick}")
    run = st.button("Run", type="primary", key="run")

if run or st.session_state.get("sql_ran"):
    st.session_state["sql_ran"] = True
    try:
        result = adhoc(ctx.warehouse, text, ctx.limits)
    except PreemptlensError as exc:
        # Refused, failed, killed at the deadline or out of memory: the query's own process ended,
        # this one (and every other reader of the server) carries on.
        st.error(str(exc))
    else:
        shown = f"{result.frame.height:,} row{'s' if result.frame.height != 1 else ''}"
        if result.truncated:
            shown += f" (cut at sql.max_rows = {ctx.limits.max_rows:,})"
        st.caption(shown)
        st.dataframe(result.frame, hide_index=True, key="result")
        st.download_button("Download CSV", csv_text(result.frame), file_name="preemptlens-query.csv",
                           mime="text/csv", key="download")
