-- Quarantined records by source, table, field and reason, with one example record each.
SELECT source, target_table, field, count(*) AS records, min(record) AS example_record, min(reason) AS example_reason
FROM quarantine
GROUP BY source, target_table, field
ORDER BY records DESC, source, target_table, field
