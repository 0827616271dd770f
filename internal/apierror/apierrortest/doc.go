// Package apierrortest reads, in tests, the error objects that package
// apierror writes: it fails a test whose body is not exactly the OpenAI
// error object, and returns the object's code.
//
// It owns test fixtures only. It must never be imported by code that ships
// in a binary.
package apierrortest
