"""Everything that changes the cluster: guard rules (guards.py), the journal
(journal.py), runlocks (runlocks.py), the shift log (shiftlog.py) and the
workflows (workflows/), which the TUI and the CLI both drive through
`context.OpsContext`. See docs/CONTRACTS.md, "Workflows"."""
