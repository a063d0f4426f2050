"""The head node: tables, store (all SQL), policy (pure), daemon and client."""
