// Package v1alpha1 holds the ReplicaTier API of the sluice.dev group: the
// types with their OpenAPI and CEL markers, the condition vocabulary, and the
// pure validation function that mirrors every CRD rule so the manager, the
// router's file source and the API server agree.
//
// The package must stay pure: no client code, no I/O, no clock.
//
// +kubebuilder:object:generate=true
// +groupName=sluice.dev
package v1alpha1
