"""What a run will do, unit by unit: the plan, the selected items, replay and sampling until
decided."""
