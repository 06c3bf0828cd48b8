//! Intel NIC hardware definitions.
