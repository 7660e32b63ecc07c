"""Operations (admins only): quarantined records as their source sent them, alerts not delivered, and what the
collected data lacks (data_issues)."""

from __future__ import annotations

import streamlit as st

from preemptlens.dashboards.views_common import context

ctx = context()
rows = ctx.settings.table_rows
st.title("Operations")
st.caption("Shown to admins only: raw records may hold anything a source sent, and receivers' errors name their "
           "endpoints.")

st.header("Quarantined records")
quarantined = ctx.q("quarantined", rows)
if quarantined.height == 0:
    st.success("No record has been quarantined.")
else:
    st.caption(f"The newest {quarantined.height:,} (at most dashboard.table_rows), each with the field that failed.")
    st.dataframe(quarantined, hide_index=True, key="quarantine")

st.header("Alert delivery errors")
errors = ctx.q("alert_errors", rows)
if errors is None:
    st.info("This warehouse has no alerts table yet.")
elif errors.height == 0:
    st.success("Every alert was delivered, or is waiting for its first attempt.")
else:
    st.dataframe(errors, hide_index=True, key="alert_errors")

st.header("What the data lacks")
issues = ctx.q("data_issues")
if issues is None:
    st.info("Run `preemptlens analyze` to see what the collected data lacks.")
elif issues.height == 0:
    st.success("Every preemption has its run start, pool and preemptor, and every run its job.")
else:
    st.caption("Per collector: preemptions whose run start, pool or preemptor is unknown (in the ledger, with the "
               "figures that need it unknown, never zero), preemption links whose victim was never collected "
               "(not in the ledger), and runs the figures had to correct. The view `data_issues` lists each one.")
    st.dataframe(issues, hide_index=True, key="data_issues",
                 column_config={"records": st.column_config.NumberColumn("records", format="%d"),
                                "jobs": st.column_config.NumberColumn("jobs", format="%d")})
