-- Which component wrote each preemption link: for a Kubernetes event, its
-- reportingController / reportingComponent (default-scheduler, kueue-admission,
-- kai-scheduler, volcano, or a name set in kubernetes.reporters). An event is
-- believed only from the component trusted with its kind of preemption; the
-- rest is quarantined. NULL where the source names no writer (files, and
-- links loaded before this column).
ALTER TABLE preemption_links ADD COLUMN reporter VARCHAR;
