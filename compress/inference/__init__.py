"""A finished run's model in the user's hands: loaded to answer (:mod:`.loaded`)."""
