"""The built-in domains as an episode source (`source`): flatscore's own episode loop over
`flatscore.domains`, one module per job: planning the run files and jobs (`source`), building
an episode's agent and user from its recipes (`agent`), running one job (`job`)."""
