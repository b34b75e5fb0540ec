"""PCIe: config space, MRRS, AER, peer-to-peer paths, device owners."""
