// Package guardclient reads the guard.xila.us kinds from the API server as
// typed objects: single reads that bypass every cache, and list-watches for
// informers. It is the small part of a generated clientset that the
// scheduler plugin and the admission webhook need.
package guardclient
