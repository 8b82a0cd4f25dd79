"""contacts"""
