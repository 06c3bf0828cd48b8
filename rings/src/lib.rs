//! DMA memory, mempools and descriptor rings.
