"""pate_stab.features: privacy-free feature extractors (data-independent or fitted on public data only)."""

from pate_stab.features.scattering import num_channels, scattering2d, scattering_filters, scattering_shape

__all__ = ["num_channels", "scattering2d", "scattering_filters", "scattering_shape"]
