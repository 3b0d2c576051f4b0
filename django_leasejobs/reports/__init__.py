"""The read side: stats, health, history, the per-minute samples, the lease advice
and the summaries the faces and the worker print."""
