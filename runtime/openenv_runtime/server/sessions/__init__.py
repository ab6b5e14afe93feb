"""Sessions and capacity: one environment instance per session, resumed, drained, checkpointed, warmed."""
