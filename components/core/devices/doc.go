// Package devices judges the devices Dynamic Resource Allocation hands
// out, one at a time: it finds the evidence that names an allocated
// device, checks what the device's ResourceSlice says against it, reads
// how a claim's configuration shares the device, and narrows the node's
// evidence to that one device, so that the evaluator judges the device a
// pod is given rather than the node it runs on.
//
// A ResourceSlice is written with the credentials of the node whose
// devices it lists, so nothing it says is believed: its attributes only
// have to agree with the evidence, and a device no evidence names is
// indeterminate.
package devices
