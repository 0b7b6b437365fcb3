"""The models a run is given: pinned Hub snapshots, the embedded reference model, and a run's model identity record."""
