"""The data path's reconcile stage, external-dns's controller: one zone at a time from the desired records
to the provider. `worker` runs the per-zone loops (read, plan, guard, write, report) and `schedule` says
when each owned zone goes next; `batches` counts and halves a plan's changes, `delete_guard` holds back the
namespace policy's mass deletes, `change_log` writes a line per change and one per zone, `zone_reports`
turns conflicts, held-back changes and refused records into log lines, metrics and Events."""
