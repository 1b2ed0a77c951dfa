"""Many machines: workers that claim runs from a shared store, submitting runs, migrating stores."""
