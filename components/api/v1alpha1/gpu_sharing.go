package v1alpha1

// MIGPartitioned reports whether the device is partitioned into MIG
// instances: mig is true, or sharingMode is MIG, as it was written before
// the mig field existed.
func (d *GPUDevice) MIGPartitioned() bool {
	return d.MIG || d.SharingMode == SharingMIG
}

// SliceSharing returns how the device, or each of its MIG slices, is
// shared: Exclusive, MPS or TimeSlicing, or empty when unknown. The older
// sharingMode MIG reads as Exclusive: MIG slices each given to one
// container.
func (d *GPUDevice) SliceSharing() GPUSharingMode {
	if d.SharingMode == SharingMIG {
		return SharingExclusive
	}
	return d.SharingMode
}
