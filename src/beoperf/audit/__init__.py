"""Latency audit: inspect NIC, offload and firewall settings that cost latency."""
