// Package teeresources makes a TEE node's SGX resources schedulable, as
// Intel's SGX device plugin and NFD do, from the node's verified evidence
// rather than from whatever the node says:
//
//   - sgx.intel.com/enclave: a kubelet device plugin (Plugin) advertising a
//     fixed number of enclave devices, healthy only while the node's
//     evidence qualifies; an allocation hands the container
//     /dev/sgx_enclave (in the lab, /dev/null in its place);
//   - sgx.intel.com/epc: the enclave page cache in bytes, an extended
//     resource of the node's status (one device per byte would be absurd),
//     patched by the Agent to the size the node's NodeSecurityState states
//     and to 0 when the evidence does not qualify (Qualify).
//
// The scheduler then counts both like CPU or memory. It is capacity
// accounting, not isolation: the SGX driver, not Kubernetes, limits what
// an enclave may use.
package teeresources
