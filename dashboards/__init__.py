"""Read-only consumers of the warehouse: the Streamlit app and the reports."""
