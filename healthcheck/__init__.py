"""The appliance's health: a service that watches the inference server (and restarts it through supervisord when
it stays unhealthy), and the probe that Docker's HEALTHCHECK calls."""
