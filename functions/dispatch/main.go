// Command dispatch is the producer-side Lambda function: intake of
// submissions and the periodic sweep. (Being built; see issue 3.)
package main

func main() {}
