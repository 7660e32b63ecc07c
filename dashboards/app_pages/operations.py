"""Operations (admins only): quarantined records as their source sent them, and alerts not delivered."""

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
