// Package apikeystest holds fixtures for tests of key rotation: a key file
// laid out the way the kubelet mounts a Secret, and a Watch run on a fake
// clock that a test steps one read at a time.
//
// It owns test fixtures only. It must never be imported by code that ships
// in a binary, and never wait with sleeps: every wait is on a channel,
// bounded by FailSafe.
package apikeystest
